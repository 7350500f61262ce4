# Builds the web chat page into loom_server: web/embed_assets.cmake turns the files listed in
# web/assets.cmake into a generated C++ source of byte arrays (raw and gzip), regenerated when
# any of them changes. Included from the top-level CMakeLists.txt after loom_server exists.
include(${CMAKE_SOURCE_DIR}/web/assets.cmake)
set(webui_files "")
set(webui_missing "")
list(LENGTH LOOM_WEBUI_ASSETS n)
math(EXPR last "${n} - 1")
foreach(i RANGE 1 ${last} 2)
  list(GET LOOM_WEBUI_ASSETS ${i} rel)
  set(f ${CMAKE_SOURCE_DIR}/web/${rel})
  if(NOT EXISTS ${f})
    list(APPEND webui_missing "  web/${rel}")
  endif()
  list(APPEND webui_files ${f})
endforeach()
if(webui_missing)
  list(JOIN webui_missing "\n" missing_text)
  message(FATAL_ERROR "The web chat page's files are missing:\n${missing_text}\n"
          "Its libraries (marked, DOMPurify, highlight.js) come from npm: run "
          "scripts/install-deps.sh, or `npm ci` in ${CMAKE_SOURCE_DIR}/web, then configure again.")
endif()
set(webui_cpp ${CMAKE_BINARY_DIR}/generated/webui_assets.cpp)
add_custom_command(
  OUTPUT ${webui_cpp}
  COMMAND ${CMAKE_COMMAND} -DWEB_DIR=${CMAKE_SOURCE_DIR}/web -DOUT=${webui_cpp}
          -DWORK_DIR=${CMAKE_BINARY_DIR}/generated/webui -P ${CMAKE_SOURCE_DIR}/web/embed_assets.cmake
  DEPENDS ${webui_files} ${CMAKE_SOURCE_DIR}/web/assets.cmake
          ${CMAKE_SOURCE_DIR}/web/embed_assets.cmake
  COMMENT "Embedding the web chat page (web/) into loom_server"
  VERBATIM)
target_sources(loom_server PRIVATE ${webui_cpp})
