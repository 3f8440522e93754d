// resident: the command-line tool.
#include <iostream>

#include "command_line.hpp"
#include "resident/error.hpp"

int main(int argc, char** argv) {
  resident::cli::command_line cl;
  try {
    cl.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cl.app().exit(e);
  }
  try {
    return cl.run();
  } catch (const resident::error& e) {
    std::cerr << "resident: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "resident: unexpected error: " << e.what() << "\n";
    return 2;
  }
}
