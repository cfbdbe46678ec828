# Writes a C++ source that holds report.js and report.css as raw string literals (run by the build:
# cmake -DJS=... -DCSS=... -DOUT=... -P embed_assets.cmake). The delimiters must not occur in the assets.
file(READ ${JS} js_text)
file(READ ${CSS} css_text)
foreach(text js_text css_text)
  string(FIND "${${text}}" ")tpkasset\"" found)
  if(NOT found EQUAL -1)
    message(FATAL_ERROR "embed_assets: the raw-string delimiter occurs in an asset")
  endif()
endforeach()
foreach(banned "</script" "<script" "<!--")
  string(FIND "${js_text}" "${banned}" found)
  if(NOT found EQUAL -1)
    message(FATAL_ERROR "embed_assets: report.js must not contain '${banned}' (it is inlined into index.html)")
  endif()
endforeach()
file(WRITE ${OUT}.tmp "// Generated from report/assets by embed_assets.cmake; do not edit.\n"
  "#include \"report/assets.hpp\"\n\nnamespace tierpack::report {\n\n"
  "const std::string_view kReportJs = R\"tpkasset(${js_text})tpkasset\";\n\n"
  "const std::string_view kReportCss = R\"tpkasset(${css_text})tpkasset\";\n\n"
  "}  // namespace tierpack::report\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
