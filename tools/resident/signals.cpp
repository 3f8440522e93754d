// SIGINT, SIGTERM, SIGHUP in the CLI. The handler only writes the signal's number into a pipe (all a
// handler may safely do); a thread of its own reads it, removes the private folders and raises the
// signal again with its default action. Not sigwait with the signals blocked: threads started before
// main (OpenBLAS's pool, made as the library loads) would not have them blocked and take them first.
#include "signals.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <system_error>
#include <thread>

#include "resident/detail/files.hpp"

namespace resident::cli {
namespace {

int pipe_in = -1;  // written by the handler

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!::write(pipe_in, &b, 1);
  errno = saved;
}

}  // namespace

void remove_private_folders_on_signals() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  const int pipe_out = fds[0];
  pipe_in = fds[1];
  try {
    std::thread([pipe_out] {
      unsigned char b = 0;
      while (::read(pipe_out, &b, 1) != 1) {
      }
      resident::detail::remove_private_folders_now();
      // Ended by the signal itself, so the exit status still says which one.
      const int sig = b;
      std::signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      std::raise(sig);
      std::_Exit(128 + sig);  // not reached: the default action of all three ends the process
    }).detach();
  } catch (const std::system_error&) {  // no thread: the signals keep their default action
    ::close(fds[0]), ::close(fds[1]);
    return;
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // ignored (nohup): left so
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace resident::cli
