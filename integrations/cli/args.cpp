// The subcommands' command line through CLI11 (see args.hpp). CLI11 matches the flags and writes the
// help; what it reports is turned into tierpack's one-line usage errors here, so the wording users and
// tests see ("unknown flag '--x'", "flag --xml needs a value") does not depend on CLI11's.
#include "integrations/cli/args.hpp"

#include <algorithm>
#include <memory>

#include <CLI/CLI.hpp>

namespace tierpack::cli {

namespace {

constexpr std::size_t kHelpWidth = 100;   // columns of the help text
constexpr std::size_t kOptionColumn = 24; // where option descriptions start

/// `text` wrapped to `width` columns, every line after the first indented by `indent` spaces; '\n' in
/// `text` starts a new line.
std::string wrap(const std::string& text, std::size_t indent, std::size_t first_used, std::size_t width) {
  std::string out;
  std::size_t col = first_used;
  std::size_t pos = 0;
  bool line_start = true;
  while (pos < text.size()) {
    if (text[pos] == '\n') {
      out += "\n" + std::string(indent, ' ');
      col = indent;
      line_start = true;
      ++pos;
      continue;
    }
    if (text[pos] == ' ') {
      ++pos;
      continue;
    }
    std::size_t end = text.find_first_of(" \n", pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (!line_start && col + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
      line_start = true;
    }
    if (!line_start) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    line_start = false;
    pos = end;
  }
  return out;
}

/// The help of one subcommand, from the options registered with CLI11: a usage line listing every
/// option, the description, one line (or more) per option, the footer.
class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(const ArgSpec& spec) : spec_(spec) {}

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    const std::string lead = "usage: " + app->get_name();
    std::vector<std::string> items;
    std::vector<const CLI::Option*> flags;
    const CLI::Option* positional = nullptr;
    for (const CLI::Option* o : app->get_options()) {
      if (o->get_positional()) {
        positional = o;
        continue;
      }
      flags.push_back(o);
      if (o == app->get_help_ptr()) continue;
      items.push_back("[" + option_name(o) + "]");
    }
    if (positional) {
      std::string p = positional->get_type_name();
      if (spec_.max_positional > 1) p += " ...";
      items.insert(items.begin(), spec_.min_positional > 0 ? p : "[" + p + "]");
    }
    if (!spec_.child.empty()) items.push_back(spec_.child);
    std::string out = lead;
    std::size_t col = lead.size();
    for (const auto& item : items) {
      if (col + 1 + item.size() > kHelpWidth && col > lead.size()) {
        out += "\n" + std::string(lead.size(), ' ');
        col = lead.size();
      }
      out += " " + item;
      col += 1 + item.size();
    }
    out += "\n";
    if (!app->get_description().empty()) out += app->get_description();
    out += "options:\n";
    auto line = [&](const std::string& name, const std::string& help) {
      std::string l = "  " + name;
      if (l.size() + 2 > kOptionColumn) {
        out += l + "\n" + std::string(kOptionColumn, ' ');
      } else {
        out += l + std::string(kOptionColumn - l.size(), ' ');
      }
      out += wrap(help, kOptionColumn, kOptionColumn, kHelpWidth) + "\n";
    };
    if (positional) line(positional->get_type_name(), positional->get_description());
    for (const CLI::Option* o : flags) line(option_name(o), o->get_description());
    if (!app->get_footer().empty()) out += app->get_footer();
    return out;
  }

  /// "--fast-budget SIZE|PCT", "--json", "-h, --help".
  static std::string option_name(const CLI::Option* o) {
    std::string names = o->get_name(false, true);
    for (std::size_t p = 0; (p = names.find(',', p)) != std::string::npos; p += 2) names.replace(p, 1, ", ");
    if (o->get_items_expected() == 0) return names;
    return names + " " + o->get_type_name();
  }

 private:
  const ArgSpec& spec_;
};

std::unique_ptr<CLI::App> make_app(std::string_view command, const ArgSpec& spec) {
  auto app = std::make_unique<CLI::App>(spec.description, "tierpack " + std::string(command));
  app->set_help_flag("-h,--help", "print this help");
  app->allow_extras();  // unknown flags and stray arguments are reported below, in tierpack's words
  app->formatter(std::make_shared<HelpFormatter>(spec));
  app->footer(spec.footer);
  if (spec.max_positional > 0) {
    app->add_option("positional", spec.positional_help)
        ->type_name(spec.positional)
        ->expected(1, static_cast<int>(spec.max_positional))
        ->allow_extra_args(spec.max_positional > 1)  // CLI11 fills a positional beyond one only so; the most: below
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  for (const auto& o : spec.options) {
    if (o.value.empty()) {
      app->add_flag(o.name, o.help)->disable_flag_override();
    } else {
      // TakeAll: a second occurrence is kept, and refused in parse_args with a message naming the flag.
      app->add_option(o.name, o.help)->type_name(o.value)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
  return app;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string strip_dashes(const std::string& s) {
  const std::size_t p = s.find_first_not_of('-');
  return p == std::string::npos ? std::string() : s.substr(p);
}

/// Unknown flags and stray arguments CLI11 set aside: the first unknown flag, else the first stray
/// argument, is a usage error.
void refuse_extras(const CLI::App& app, const std::string& hint, const ArgSpec& spec) {
  const auto extras = app.remaining();
  for (const auto& x : extras) {
    if (x.size() < 2 || x[0] != '-') continue;
    const std::string flag = x.substr(0, x.find('='));
    std::string closest;
    std::size_t best = 3;
    for (const auto& o : spec.options) {
      const std::size_t d = edit_distance(flag, o.name);
      if (d < best) best = d, closest = o.name;
    }
    throw usage_error("unknown flag '" + flag + "' (" + (closest.empty() ? "" : "did you mean " + closest + "? ") + hint +
                      ")");
  }
  if (!extras.empty()) throw usage_error("unexpected argument '" + extras.front() + "' (" + hint + ")");
}

}  // namespace

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values.find(flag);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
  return get(flag).value_or(fallback);
}

Args parse_args(std::string_view command, const std::vector<std::string>& argv, const ArgSpec& spec) {
  Args a;
  a.argv = argv;
  const std::string hint = "try tierpack " + std::string(command) + " --help";
  // Everything after the first "--" is the child command's, whatever it looks like: CLI11 never sees it.
  const auto dashes = std::find(argv.begin(), argv.end(), std::string("--"));
  std::vector<std::string> reversed;
  for (auto it = argv.begin(); it != dashes; ++it) {
    // "-o=FILE" means "-o FILE" as "--plan=FILE" means "--plan FILE" (to CLI11 it is "-o" "=FILE").
    const std::size_t eq = it->find('=');
    const bool short_with_eq = it->size() > 2 && (*it)[0] == '-' && (*it)[1] != '-' && eq != std::string::npos &&
                               std::any_of(spec.options.begin(), spec.options.end(),
                                           [&](const OptionSpec& o) { return o.name == it->substr(0, eq); });
    if (short_with_eq) {
      reversed.push_back(it->substr(0, eq));
      reversed.push_back(it->substr(eq + 1));
    } else {
      reversed.push_back(*it);
    }
  }
  std::reverse(reversed.begin(), reversed.end());  // CLI11 takes its arguments last first
  const auto app = make_app(command, spec);
  try {
    app->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    a.help = true;
    return a;
  } catch (const CLI::ArgumentMismatch& e) {
    refuse_extras(*app, hint, spec);
    // CLI11 names the option first ("--xml: 1 required SIZE missing", "json was given a disallowed flag
    // override"): say it in tierpack's words.
    const std::string what = e.what();
    for (const auto& o : spec.options) {
      const std::string bare = strip_dashes(o.name);
      for (const std::string& n : {o.name, bare}) {
        if (what.rfind(n, 0) != 0 || what.size() == n.size() || (what[n.size()] != ':' && what[n.size()] != ' ')) continue;
        throw usage_error("flag " + o.name + (o.value.empty() ? " takes no value" : " needs a value"));
      }
    }
    throw usage_error(what + " (" + hint + ")");
  } catch (const CLI::ParseError& e) {
    refuse_extras(*app, hint, spec);
    throw usage_error(std::string(e.what()) + " (" + hint + ")");
  }
  refuse_extras(*app, hint, spec);
  if (dashes != argv.end()) {
    if (spec.child.empty()) throw usage_error("unexpected '--': this command runs no child command");
    a.child.assign(dashes + 1, argv.end());
    if (a.child.empty()) throw usage_error("missing command after '--'");
  }
  for (const auto& o : spec.options) {
    const CLI::Option* opt = app->get_option(o.name);
    if (opt->count() == 0) continue;
    if (o.value.empty()) {
      a.switches.insert(o.name);
      continue;
    }
    // A single-value flag given twice is an error: which one was meant cannot be known (issue 26).
    if (opt->count() > 1)
      throw usage_error(o.name + " given " + (opt->count() == 2 ? std::string("twice") : std::to_string(opt->count()) + " times") +
                        ": give it once (" + hint + ")");
    const std::string value = opt->results().front();
    if (value.empty()) throw usage_error("flag " + o.name + " needs a non-empty value");
    a.values[o.name] = value;
  }
  if (spec.max_positional > 0) a.positional = app->get_option("positional")->results();
  if (a.positional.size() > spec.max_positional)
    throw usage_error("unexpected argument '" + a.positional[spec.max_positional] + "' (" + hint + ")");
  if (a.positional.size() < spec.min_positional)
    throw usage_error(std::string(spec.min_positional == 1 ? "missing argument " : "missing arguments ") + spec.positional +
                      " (" + hint + ")");
  return a;
}

std::string usage(std::string_view command, const ArgSpec& spec) { return make_app(command, spec)->help(); }

int count_flag(const Args& args, const std::string& flag, int fallback, int min) {
  const auto v = args.get(flag);
  if (!v) return fallback;
  try {
    std::size_t used = 0;
    const int n = std::stoi(*v, &used);
    if (used != v->size() || n < min) throw std::invalid_argument("range");
    return n;
  } catch (const std::exception&) {
    throw usage_error("flag " + flag + " needs an integer >= " + std::to_string(min) + ", not '" + *v + "'");
  }
}

}  // namespace tierpack::cli
