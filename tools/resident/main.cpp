// resident: the command-line tool. Exit codes (docs/errors.md lists them): 0 done; 1 a typed error or
// a result that failed its check; 2 anything unexpected; 3 out of memory; 100-127 a bad command line.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "command_line.hpp"
#include "commands/table.hpp"
#include "signals.hpp"
#include "resident/error.hpp"

namespace {

// An error in the CLI's words, within 100 columns: the library's source locations (" [src/x.cpp:12]",
// for C++ callers and bug reports) left out; the person at the command line acts on the words.
void say(const std::string& prefix, std::string message) {
  for (const char* root : {" [include/", " [src/", " [tools/", " [python/", " [bench/"})
    for (std::size_t at; (at = message.find(root)) != std::string::npos;) {
      const std::size_t end = message.find(']', at);
      if (end == std::string::npos) break;
      message.erase(at, end + 1 - at);
    }
  std::cerr << resident::cli::wrap(prefix + message, 100) << "\n";
}

// What went to standard output must have arrived (a full disk, a closed descriptor, `ulimit -f`): a table,
// --json - or --help lost on the way is an error, not exit status 0.
bool output_arrived(const char* what) {
  errno = 0;
  std::cout.flush();
  if (!std::cout.fail() && std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
  say("resident: error: ", std::string("the output could not be written to standard output (") +
                               (errno ? std::strerror(errno) : "write failed") + "); " + what);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past `ulimit -f` then fails with EFBIG and is reported, the earlier file kept, instead of the
  // signal ending the process.
  std::signal(SIGXFSZ, SIG_IGN);
  resident::cli::remove_private_folders_on_signals();  // removed when a signal ends the process
  resident::cli::command_line cl;
  try {
    cl.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    const int rc = cl.app().exit(e);
    return output_arrived("send it to a terminal, a pipe or a file with room") ? rc : 1;
  } catch (const CLI::ParseError& e) {
    say("resident: ", cl.explain(e));
    return e.get_exit_code();
  }
  try {
    const int rc = cl.run();
    if (!output_arrived(cl.writes_json_file() ? "the --json file was written; give the table a terminal, a pipe "
                                                "or a file with room"
                                              : "write it to a file with --json FILE"))
      return 1;
    return rc;
  } catch (const resident::out_of_memory& e) {
    say("resident: error: ", e.what());
    return 3;
  } catch (const resident::error& e) {
    say("resident: error: ", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    say("resident: error: ", "out of memory: an allocation on the host failed (std::bad_alloc); "
                             "choose smaller sizes or free memory");
    return 3;
  } catch (const std::exception& e) {
    say("resident: unexpected error: ", e.what());
    return 2;
  }
}
