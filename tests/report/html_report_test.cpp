// index.html, structurally: every section is there, the numbers it states are the profile's, it
// loads nothing from elsewhere, and its embedded chart data is valid JSON of a bounded size.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "report/html_report.hpp"
#include "report/summary.hpp"
#include "tests/report/report_fixtures.hpp"

using namespace tierpack;
using namespace tierpack::report;
using namespace tierpack::report::testing;

namespace {

struct Rendered {
  Profile profile;
  std::optional<Plan> plan;
  std::optional<RunStats> run;
  std::string html;
};

Rendered render(const FixtureOptions& o, bool with_plan) {
  Rendered r;
  r.profile = make_training_profile(o);
  ReportInputs in;
  in.profile = &r.profile;
  in.profile_path = "run.tpk";
  if (with_plan) {
    r.plan = make_plan(r.profile, r.profile.peak_bytes(0) / 2);
    r.run = make_run_stats(r.profile, *r.plan);
    in.plan = &*r.plan;
    in.run_stats = &*r.run;
  }
  r.html = render_html(build_model(in, {}));
  return r;
}

// data-metric="name" data-value="v" pairs of the page.
std::map<std::string, double> metrics(const std::string& html) {
  std::map<std::string, double> out;
  const std::regex re("data-metric=\"([^\"]+)\" data-value=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it)
    out[(*it)[1]] = std::stod((*it)[2]);
  return out;
}

// The data-value cells of one table, row by row.
std::vector<std::vector<double>> table_values(const std::string& html, const std::string& id) {
  const auto start = html.find("<table id=\"" + id + "\"");
  if (start == std::string::npos) return {};
  const auto end = html.find("</table>", start);
  const std::string table = html.substr(start, end - start);
  std::vector<std::vector<double>> rows;
  const std::regex row_re("<tr>(.*?)</tr>"), val_re("data-value=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row_re); it != std::sregex_iterator(); ++it) {
    const std::string row = (*it)[1];
    std::vector<double> vals;
    for (auto v = std::sregex_iterator(row.begin(), row.end(), val_re); v != std::sregex_iterator(); ++v)
      vals.push_back(std::stod((*v)[1]));
    if (!vals.empty()) rows.push_back(vals);
  }
  return rows;
}

nlohmann::json chart_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const auto b = html.find(open);
  const auto e = html.find("</script>", b);
  return nlohmann::json::parse(html.substr(b + open.size(), e - b - open.size()));
}

TEST(HtmlReport, EverySectionIsPresentInOrder) {
  const auto r = render({}, true);
  std::size_t last = 0;
  for (auto id : html_section_ids()) {
    const auto at = r.html.find("<section id=\"" + std::string(id) + "\">");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_GT(at, last) << id;
    last = at;
    EXPECT_NE(r.html.find("href=\"#" + std::string(id) + "\""), std::string::npos) << "nav link to " << id;
  }
  for (const char* canvas : {"lifetimes-canvas", "migrations-canvas"})
    EXPECT_NE(r.html.find(canvas), std::string::npos) << canvas;
  for (const char* table : {"memory-table", "pagemap-table", "groups-table", "migrations-table", "top-tensors-table",
                            "classes-table", "false-sharing-table", "hidden-accesses-table", "iterations-table",
                            "divergences-table", "savings-table"})
    EXPECT_NE(r.html.find("<table id=\"" + std::string(table) + "\""), std::string::npos) << table;
  EXPECT_EQ(r.html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(r.html.find("</html>"), std::string::npos);
}

TEST(HtmlReport, NumbersMatchTheProfile) {
  const auto r = render({}, true);
  const Profile& p = r.profile;
  const auto m = metrics(r.html);
  EXPECT_EQ(m.at("peak_bytes.gpu0"), static_cast<double>(p.peak_bytes(0)));
  EXPECT_EQ(m.at("peak_bytes.host"), static_cast<double>(p.peak_bytes(-1)));
  EXPECT_EQ(m.at("tensors"), static_cast<double>(p.tensors.size()));
  EXPECT_EQ(m.at("ops"), static_cast<double>(p.ops.size()));
  double fs = 0, hidden = 0, diverged = 0, fs_t = 0;
  for (const auto& pg : p.pages) fs += pg.false_shared, hidden += pg.hidden_windows > 0;
  for (const auto& it : p.iterations) diverged += !it.matches_profiled;
  for (const auto& t : p.tensors) fs_t += t.has(kTensorFalseShared);
  EXPECT_EQ(m.at("false_shared_pages"), fs);
  EXPECT_EQ(m.at("hidden_pages"), hidden);
  EXPECT_EQ(m.at("diverged_iterations"), diverged);
  EXPECT_EQ(m.at("false_shared_tensors"), fs_t);
  EXPECT_EQ(m.at("iteration_ns"), static_cast<double>(p.iteration_ns));

  // Memory table, profile row: the fast tier's peak is gpu0's peak; the budget is the plan's.
  const auto mem = table_values(r.html, "memory-table");
  ASSERT_EQ(mem.size(), 3u);
  EXPECT_EQ(mem[0][1], static_cast<double>(p.peak_bytes(0)));
  EXPECT_EQ(mem[0][2], static_cast<double>(r.plan->fast_budget_bytes));
  EXPECT_EQ(mem[1][3], static_cast<double>(r.plan->prediction.fast_peak_bytes));

  // Classes: counts and bytes add up to the profile's.
  const auto cls = table_values(r.html, "classes-table");
  ASSERT_EQ(cls.size(), 4u);
  double count = 0, bytes = 0, all = 0;
  for (const auto& row : cls) count += row[0], bytes += row[1];
  for (const auto& t : p.tensors) all += static_cast<double>(t.bytes);
  EXPECT_EQ(count, static_cast<double>(p.tensors.size()));
  EXPECT_EQ(bytes, all);

  // Top tensors: the first row is the tensor with the largest bytes x lifetime.
  const auto top = table_values(r.html, "top-tensors-table");
  ASSERT_FALSE(top.empty());
  const ReportModel model = [&] {
    ReportInputs in;
    in.profile = &p;
    return build_model(in, {});
  }();
  EXPECT_EQ(top[0][1], static_cast<double>(model.top_tensors[0].bytes));

  // Iterations table lists every observed iteration.
  EXPECT_EQ(table_values(r.html, "iterations-table").size(), p.iterations.size());
  // Savings: at least the four default budgets plus plan and run rows.
  EXPECT_GE(table_values(r.html, "savings-table").size(), 6u);
}

TEST(HtmlReport, SummaryIsAtTheTopAndPlain) {
  const auto r = render({}, false);
  const auto summary = r.html.find("<section id=\"summary\">");
  const auto memory = r.html.find("<section id=\"memory\">");
  const auto peak = r.html.find("Peak ", summary);
  ASSERT_NE(peak, std::string::npos);
  EXPECT_LT(peak, memory);
  EXPECT_NE(r.html.find("sits idle for &gt; "), std::string::npos);
}

TEST(HtmlReport, SelfContained) {
  const auto r = render({}, true);
  for (const char* banned : {"http://", "https://", "<link", "@import", "url(", "<iframe", "<img"})
    EXPECT_EQ(r.html.find(banned), std::string::npos) << banned;
  const std::regex script_src("<script[^>]*\\ssrc=");
  EXPECT_FALSE(std::regex_search(r.html, script_src));
  // Exactly two scripts: the data and the drawing code, both inline.
  std::size_t scripts = 0;
  for (auto at = r.html.find("<script"); at != std::string::npos; at = r.html.find("<script", at + 1)) ++scripts;
  EXPECT_EQ(scripts, 2u);
}

TEST(HtmlReport, EmbeddedDataIsValidAndEscaped) {
  auto o = FixtureOptions{};
  auto p = make_training_profile(o);
  p.ops[3].name = "aten::evil</script><script>alert(1)</script>";
  ReportInputs in;
  in.profile = &p;
  const auto html = render_html(build_model(in, {}));
  EXPECT_EQ(html.find("<script>alert(1)"), std::string::npos);
  const auto d = chart_data(html);
  for (const char* key : {"classes", "iteration_ns", "memory", "lifetimes", "pagemaps", "migrations"})
    EXPECT_TRUE(d.contains(key)) << key;
  EXPECT_GE(d["memory"][0]["peak"].get<std::uint64_t>(), p.peak_bytes(0));
  // Page-map cells use the documented alphabet, one per cell.
  for (const auto& pm : d["pagemaps"]) {
    const auto cells = pm["cells"].get<std::string>();
    EXPECT_EQ(cells.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), std::string::npos);
  }
}

TEST(HtmlReport, WithoutPlanSaysSoAndWithoutPageDataToo) {
  FixtureOptions o;
  o.page_data = false;
  const auto r = render(o, false);
  EXPECT_NE(r.html.find("No plan and no run statistics given"), std::string::npos);
  EXPECT_NE(r.html.find("No page data"), std::string::npos);
  EXPECT_NE(r.html.find("No false-shared pages in the profile."), std::string::npos);
  EXPECT_EQ(chart_data(r.html)["memory"].size(), 1u);
}


}  // namespace

// Note [Lower-bound predictions]: the savings section of a traced profile's report says its predicted
// step times are lower bounds, and why.
TEST(HtmlReport, SavingsSayWhenPredictionsAreLowerBounds) {
  const auto r = render({}, false);
  const auto savings = r.html.find("<section id=\"savings\">");
  ASSERT_NE(savings, std::string::npos);
  const auto bound = r.html.find("Predicted step times are lower bounds:</strong>", savings);
  ASSERT_NE(bound, std::string::npos);
  EXPECT_NE(r.html.find("uffd-wp page tracer", bound), std::string::npos);
}

// The top-tensors table and the lifetime chart's tooltips name where the program allocated a tensor,
// and the module it was allocated in (Note [Module paths]).
TEST(HtmlReport, TopTensorsNameTheirSourceLineAndModule) {
  Profile p = make_training_profile();
  p.sources = {{"/home/me/model.py", 63, "forward", "transformer.h.3.mlp.c_fc"}, {"/home/me/<odd>.py", 7, "<module>"}};
  ReportInputs in;
  in.profile = &p;
  const ReportModel before = build_model(in, {});
  ASSERT_GE(before.top_tensors.size(), 2u);
  p.tensors[before.top_tensors[0].id].source = 0;
  p.tensors[before.top_tensors[1].id].source = 1;
  const ReportModel model = build_model(in, {});
  EXPECT_EQ(model.top_tensors[0].source, "model.py:63 forward");
  EXPECT_EQ(model.top_tensors[0].module, "transformer.h.3.mlp.c_fc");
  const std::string html = render_html(model);
  const auto start = html.find("<table id=\"top-tensors-table\"");
  ASSERT_NE(start, std::string::npos);
  const std::string table = html.substr(start, html.find("</table>", start) - start);
  EXPECT_NE(table.find(">source<"), std::string::npos) << "a source column";
  EXPECT_NE(table.find(">module<"), std::string::npos) << "a module column";
  EXPECT_NE(table.find("model.py:63 forward"), std::string::npos);
  EXPECT_NE(table.find("transformer.h.3.mlp.c_fc"), std::string::npos);
  EXPECT_NE(table.find("&lt;odd&gt;.py:7 &lt;module&gt;"), std::string::npos) << "escaped";
  bool in_rows = false;
  const auto data = chart_data(html);
  for (const auto& row : data["lifetimes"]["rows"]) {
    in_rows |= row["src"] == "model.py:63 forward";
    EXPECT_EQ(row["mod"] == "transformer.h.3.mlp.c_fc", row["src"] == "model.py:63 forward") << row.dump();
  }
  EXPECT_EQ(in_rows, [&] {
    for (const auto& r : model.lifetimes.rows)
      if (r.tensor.source == "model.py:63 forward") return true;
    return false;
  }());
}
