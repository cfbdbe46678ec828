// The report page's script and style sheet (report/assets/report.js, report.css), embedded into the
// library at build time so index.html needs no file next to it. Generated: see report/CMakeLists.txt.
#pragma once

#include <string_view>

namespace tierpack::report {

extern const std::string_view kReportJs;
extern const std::string_view kReportCss;

}  // namespace tierpack::report
