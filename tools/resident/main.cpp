// resident: the command-line tool. Exit codes (docs/errors.md lists them): 0 done; 1 a typed error or
// a result that failed its check; 2 anything unexpected; 3 out of memory; 100-127 a bad command line.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>

#include "command_line.hpp"
#include "resident/error.hpp"

int main(int argc, char** argv) {
  // A write past `ulimit -f` then fails with EFBIG and is reported, the earlier file kept, instead of the
  // signal ending the process.
  std::signal(SIGXFSZ, SIG_IGN);
  resident::cli::command_line cl;
  try {
    cl.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return cl.app().exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "resident: " << cl.explain(e) << "\n";
    return e.get_exit_code();
  }
  try {
    const int rc = cl.run();
    // What went to standard output must have arrived (a full disk, a closed descriptor, `ulimit -f`):
    // a table or --json - lost on the way is an error, not exit status 0.
    errno = 0;
    std::cout.flush();
    if (std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::cerr << "resident: error: the output could not be written to standard output ("
                << (errno ? std::strerror(errno) : "write failed") << "); write it to a file with --json FILE\n";
      return 1;
    }
    return rc;
  } catch (const resident::out_of_memory& e) {
    std::cerr << "resident: error: " << e.what() << "\n";
    return 3;
  } catch (const resident::error& e) {
    std::cerr << "resident: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "resident: error: out of memory: an allocation on the host failed (std::bad_alloc); "
                 "choose smaller sizes or free memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "resident: unexpected error: " << e.what() << "\n";
    return 2;
  }
}
