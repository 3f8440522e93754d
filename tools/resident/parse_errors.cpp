// What the CLI says when a command line cannot be parsed: the parser's own words replaced by the option,
// the value given and an example to copy.
#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "command_line.hpp"

namespace resident::cli {
namespace {

// A value each option takes, for the examples; --sizes depends on the benchmark.
std::string example_value(const std::string& option, const std::string& command) {
  if (option == "--sizes") {
    if (command == "bench matmul") return "1024,2048";
    if (command == "bench small") return "10000";
    if (command == "bench dist") return "28";
    if (command == "bench jit") return "24,26";
    return "20,22,24";
  }
  if (option == "--size") return command == "demo" ? "200GB" : "8GiB";
  static const std::map<std::string, std::string> values{
      {"--n", "1000000"},       {"--reps", "10"},       {"--repeat", "3"},        {"--batch", "20"},
      {"--gpus", "2"},          {"--pool-limit", "2GiB"}, {"--chunk", "16MiB"},  {"--depth", "3"},
      {"--json", "out.json"},   {"--plot", "out.png"},  {"--from", "earlier.json"}, {"--peers", "peers.json"},
      {"--device", "cpu"},      {"--algos", "tuned,vendor"}, {"--examples", "build/cpu/examples"}};
  const auto v = values.find(option);
  return v == values.end() ? std::string() : v->second;
}

// The option a parser message names: at its start ("--json: ...") or after "Could not convert: ", or "".
std::string option_named(const std::string& message) {
  const std::string converting = "Could not convert: ";
  const std::size_t at = message.rfind(converting, 0) == 0 ? converting.size() : 0;
  if (message.compare(at, 2, "--") != 0) return {};
  return message.substr(at, message.find_first_of(": =", at) - at);
}

bool is_flag(const CLI::Option* o) { return o->get_expected_max() == 0; }

// "--a, --b or --c"
std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

}  // namespace

std::string command_line::command_named() const {
  std::string command;
  for (const std::string& a : args_) {
    if (a.empty() || a[0] == '-') continue;
    if (command.empty()) {
      command = a;
      if (a != "bench") break;
    } else {
      command += " " + a;
      break;
    }
  }
  return command;
}

const CLI::App* command_line::app_named(const std::string& command) const {
  const CLI::App* a = app_.get();
  std::istringstream words(command);
  for (std::string w; words >> w;) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : a->get_subcommands({})) if (s->get_name() == w) sub = s;
    if (!sub) return a;
    a = sub;
  }
  return a;
}

std::string command_line::example(const std::string& option, const std::string& command) const {
  const CLI::App* a = app_named(command);
  const CLI::Option* o = a->get_option_no_throw(option);
  if (!o) return "`resident " + command + " --help` lists its options";
  if (is_flag(o)) return "e.g. `resident " + command + " " + option + "`";
  const std::string v = example_value(option, command);
  return "e.g. `resident " + command + " " + option + " " + (v.empty() ? "VALUE" : v) + "`";
}

std::string command_line::unexpected(const std::string& message, const std::string& command) const {
  // The parser lists the arguments it could not place last first: the first one given is the last.
  std::vector<std::string> extras;
  std::istringstream words(message.substr(message.find(": ") + 2));
  for (std::string w; words >> w;) extras.insert(extras.begin(), w);
  if (extras.empty()) return message;
  const auto opt = std::find_if(extras.begin(), extras.end(), [](const std::string& a) { return a[0] == '-'; });
  const CLI::App* a = app_named(command);
  std::vector<std::string> names;
  for (const CLI::Option* o : a->get_options())
    if (o->get_name() != "--help" && o->get_name() != "-h,--help") names.push_back(o->get_name());
  const std::string its_options = names.empty() ? "it takes no options"
                                                 : "its options are " + listed(names);
  if (opt == extras.end())
    return "`resident " + command + "` does not take the value '" + extras.front() + "' on its own: values follow " +
           "their option" + (names.empty() ? "" : ", " + example(names.front(), command)) + "; " + its_options;
  // The option without a value glued to it ("--n=5"), and whether another command takes it.
  const std::string name = opt->substr(0, opt->find('='));
  std::vector<std::string> others;
  std::function<void(const CLI::App*, const std::string&)> find = [&](const CLI::App* s, const std::string& path) {
    for (const CLI::App* sub : s->get_subcommands({})) {
      const std::string p = path.empty() ? sub->get_name() : path + " " + sub->get_name();
      if (p != command && sub->get_option_no_throw(name)) others.push_back("`resident " + p + "`");
      find(sub, p);
    }
  };
  find(app_.get(), "");
  const bool single_dash = name.size() > 1 && name[1] != '-';
  if (others.size() > 3) others = {"other commands"};
  return "unknown option '" + *opt + "' for `resident " + command + "`" +
         (single_dash && a->get_option_no_throw("-" + name) ? ": options take two dashes, " + example("-" + name, command)
          : !others.empty() ? ": " + name + " belongs to " + listed(others)
                            : "") +
         "; " + its_options + " (`resident " + command + " --help` describes them)";
}

std::string command_line::explain(const CLI::ParseError& e) const {
  const std::string message = e.what();
  const std::string command = command_named();
  const std::string option = option_named(message);
  const CLI::App* a = app_named(command);
  const CLI::Option* o = option.empty() ? nullptr : a->get_option_no_throw(option);
  const std::string type = o ? o->get_type_name().substr(0, o->get_type_name().find(':')) : "a value";
  switch (CLI::ExitCodes(e.get_exit_code())) {
    case CLI::ExitCodes::ExtrasError:
      if (message.rfind("The following argument", 0) == 0) return unexpected(message, command);
      return message;  // the command line's own words (an unknown command, an option before it)
    case CLI::ExitCodes::ConversionError:
      if (o && is_flag(o))
        return option + " is a flag and takes no value (got '" + message.substr(message.find(" = ") + 3) +
               "'): give it alone, " + example(option, command);
      return (option.empty() ? std::string("an option") : option) + " cannot read the value '" +
             message.substr(message.find(" = ") + 3) + "': give " + type + ", " + example(option, command);
    case CLI::ExitCodes::ArgumentMismatch:
      if (o && o->count() > 1)
        return option + " is given " + std::to_string(o->count()) + " times: give it once, " + example(option, command);
      return option + " needs a value after it (" + type + "): " + example(option, command);
    case CLI::ExitCodes::ExcludesError: {
      const std::string other = message.substr(message.rfind(' ') + 1);
      return option + " and " + other + " exclude each other: give one of them, " + example(option, command) +
             ", or neither";
    }
    case CLI::ExitCodes::ValidationError:
    case CLI::ExitCodes::RequiredError:
      // The validators' and the command line's own words; an example where an option is named.
      if (o && message.find("e.g.") == std::string::npos) return message + "; " + example(option, command);
      return message;
    default:
      return "the command line cannot be read (" + message + "); `resident --help` describes the commands";
  }
}

}  // namespace resident::cli
