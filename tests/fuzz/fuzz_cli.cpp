// libFuzzer target: the CLI's argument parsing and the checks after it, never running a command.
// Input: arguments separated by newlines.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "resident/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"resident"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(char(data[i]));
    }
  }
  args.push_back(cur);
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  resident::cli::command_line cl;
  try {
    cl.parse(int(argv.size()), argv.data());
    cl.check();
  } catch (const CLI::ParseError& e) {
    (void)cl.explain(e);  // the words put in place of the parser's, built from the same input
  } catch (const CLI::Error&) {
  } catch (const resident::error&) {
  }
  return 0;
}
