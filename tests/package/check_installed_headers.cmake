# Checks the headers of an installed tcv (cmake -DPREFIX=DIR -P this file):
# - every quoted include of an installed header names another installed header
#   (so no public header reaches a header the package does not ship);
# - angle includes are the C++ standard library's only: tcv links oneDNN,
#   OpenBLAS, Gloo, toml++, nlohmann-json, pugixml, libspng, CUDA and NCCL
#   privately, and an embedder compiles the public headers with none of them;
# - nothing of kernels/: the vocabulary the public API names (element types,
#   the error type, the convolution algorithm, the optimizers'
#   hyper-parameters) is include/tcv/core/.
# Lists the installed headers; fails naming the file and the include.
cmake_minimum_required(VERSION 3.25)
if(NOT PREFIX)
  message(FATAL_ERROR "usage: cmake -DPREFIX=DIR -P check_installed_headers.cmake")
endif()
set(_root "${PREFIX}/include/tcv")
if(NOT IS_DIRECTORY "${_root}/engine" OR NOT EXISTS "${_root}/tcv.h")
  message(FATAL_ERROR "${_root}: no installed tcv headers (tcv.h, engine/)")
endif()

file(GLOB_RECURSE _headers RELATIVE "${_root}" "${_root}/*")
set(_errors "")
foreach(_rel IN LISTS _headers)
  if(NOT _rel MATCHES "\\.h$")
    string(APPEND _errors "\n  ${_rel}: not a header")
    continue()
  endif()
  if(_rel MATCHES "^kernels/")
    string(APPEND _errors "\n  ${_rel}: a kernels/ header (the public vocabulary is core/)")
  endif()
  get_filename_component(_dir "${_root}/${_rel}" DIRECTORY)
  file(STRINGS "${_root}/${_rel}" _lines REGEX "^[ \t]*#[ \t]*include")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(_name "${CMAKE_MATCH_1}")
      if(NOT EXISTS "${_dir}/${_name}" AND NOT EXISTS "${_root}/${_name}"
         AND NOT EXISTS "${PREFIX}/include/${_name}")
        string(APPEND _errors "\n  ${_rel}: includes \"${_name}\", which is not installed")
      endif()
    elseif(_line MATCHES "^[ \t]*#[ \t]*include[ \t]*<([^>]+)>")
      set(_name "${CMAKE_MATCH_1}")
      if(NOT _name MATCHES "^[a-z_]+$")
        string(APPEND _errors "\n  ${_rel}: includes <${_name}>, not a standard header")
      endif()
    else()
      string(APPEND _errors "\n  ${_rel}: an #include this check cannot read: ${_line}")
    endif()
  endforeach()
endforeach()
if(_errors)
  message(FATAL_ERROR "installed headers under ${_root}:${_errors}")
endif()
list(SORT _headers)
list(LENGTH _headers _count)
string(REPLACE ";" "\n  " _list "${_headers}")
message("installed headers: ${_count}, each including only installed or standard headers:\n  ${_list}")
