# Run at every build (cmake -P, from the bertrain_git_commit target): writes OUTPUT, a header defining
# BERTRAIN_GIT_COMMIT as the commit SOURCE_DIR's work tree is at ("" outside a git checkout or without git) and
# BERTRAIN_GIT_DIRTY as 1 when tracked files differ from that commit (untracked files do not count), and
# rewrites it only when that changes, so that a build never reports a commit it was not made from and an unchanged
# commit recompiles nothing.
find_package(Git QUIET)
set(commit "")
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --verify --quiet HEAD
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    set(commit "")
  endif()
endif()
set(dirty 0)
if(NOT commit STREQUAL "")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET RESULT_VARIABLE status)
  if(status EQUAL 0 AND NOT changes STREQUAL "")
    set(dirty 1)
  endif()
endif()
set(text "// Generated at every build by cmake/git_commit.cmake: the commit of the source tree (\"\": unknown).\n#pragma once\n#define BERTRAIN_GIT_COMMIT \"${commit}\"\n#define BERTRAIN_GIT_DIRTY ${dirty}\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
