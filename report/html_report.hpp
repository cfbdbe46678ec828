// index.html: the report as one self-contained web page (inline CSS, inline JS drawing on canvas,
// data embedded as JSON; no network, fonts or files outside it). Sections and their ids are
// listed in docs/report.md; tables carry raw numbers in data-value attributes for tools and tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/summary.hpp"

namespace tierpack::report {

/// Section ids of index.html, in page order.
const std::vector<std::string_view>& html_section_ids();

/// Renders the page. Its size is bounded by ReportOptions, not by the profile (docs/report.md).
std::string render_html(const ReportModel& model);

}  // namespace tierpack::report
