#pragma once
// The CLI's answer to SIGINT, SIGTERM and SIGHUP: resident's private temporary folders removed before
// the process ends. Here, not in the library: a library must not take a program's signals.

namespace resident::cli {

/// Takes SIGINT, SIGTERM and SIGHUP (those not ignored when the process started): a thread of its own
/// then removes the private folders (detail::remove_private_folders_now) and ends the process by the
/// signal's default action, so its exit status still says which signal ended it. Call it first in main.
/// Where no thread can be started, the signals keep their default action.
void remove_private_folders_on_signals();

}  // namespace resident::cli
