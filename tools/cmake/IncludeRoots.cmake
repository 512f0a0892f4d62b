# Each target exports only its own headers.
#
# Code names headers by their path from the project root
# ("daemon/format/record.h", "tools/synthetic/synthetic_trace.h"). Putting the
# project root on the include path would let any target include any header,
# whether it links the library behind it or not. Instead
#
#   loupe_include_root(<target> [BASE <dir>] [DIRS <dir>...] [HEADERS <file>...])
#
# symlinks the target's headers into its own include root,
# ${CMAKE_BINARY_DIR}/include/<target>/, at their path relative to BASE (the
# project root by default), and puts that root on the target's include path:
# PUBLIC for a library, INTERFACE for a header-only one, PRIVATE for an
# executable. A target then sees its own headers and those of the libraries it
# links (directly or through their PUBLIC links), and nothing else: a missing
# target_link_libraries is a compile error ("daemon/probes/elf_file.h: No such
# file"), not a link error much later or a silent dependency.
#
# The headers are every *.h in DIRS (the calling CMakeLists' folder by default),
# globbed with CONFIGURE_DEPENDS: a new header gets its link when the build
# re-runs CMake by itself, and the link of a removed one goes. HEADERS names
# them instead (relative to the calling folder), when a folder holds headers of
# more than one target.
function(loupe_include_root target)
  cmake_parse_arguments(ARG "" "BASE" "DIRS;HEADERS" ${ARGN})
  if(NOT ARG_BASE)
    set(ARG_BASE ${PROJECT_SOURCE_DIR})
  endif()
  set(headers)
  if(ARG_HEADERS)
    foreach(header IN LISTS ARG_HEADERS)
      cmake_path(ABSOLUTE_PATH header BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
      list(APPEND headers ${header})
    endforeach()
  else()
    if(NOT ARG_DIRS)
      set(ARG_DIRS ${CMAKE_CURRENT_SOURCE_DIR})
    endif()
    foreach(dir IN LISTS ARG_DIRS)
      cmake_path(ABSOLUTE_PATH dir BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
      file(GLOB found CONFIGURE_DEPENDS ${dir}/*.h)
      list(APPEND headers ${found})
    endforeach()
  endif()

  set(root ${CMAKE_BINARY_DIR}/include/${target})
  set(links)
  foreach(header IN LISTS headers)
    cmake_path(IS_PREFIX ARG_BASE ${header} NORMALIZE inside)
    if(NOT inside)
      message(FATAL_ERROR "loupe_include_root(${target}): ${header} is not under ${ARG_BASE}")
    endif()
    file(RELATIVE_PATH relative ${ARG_BASE} ${header})
    set(link ${root}/${relative})
    list(APPEND links ${link})
    if(IS_SYMLINK ${link})
      file(READ_SYMLINK ${link} points_to)
      if(points_to STREQUAL header)
        continue()
      endif()
    endif()
    cmake_path(GET link PARENT_PATH parent)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${header} ${link} SYMBOLIC)
  endforeach()
  # Links of headers that were removed or renamed.
  file(GLOB_RECURSE present LIST_DIRECTORIES false ${root}/*)
  foreach(link IN LISTS present)
    if(NOT link IN_LIST links)
      file(REMOVE ${link})
    endif()
  endforeach()
  file(MAKE_DIRECTORY ${root})

  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
  elseif(type STREQUAL "EXECUTABLE")
    set(scope PRIVATE)
  else()
    set(scope PUBLIC)
  endif()
  target_include_directories(${target} ${scope} ${root})
endfunction()
