# Checks the headers of an installed tcv (cmake -DPREFIX=DIR -P this file):
# - every quoted include of an installed header names another installed header
#   (so no public header reaches a header the package does not ship);
# - angle includes are the C++ standard library's, OpenMP's <omp.h> or
#   nlohmann-json's <nlohmann/json.hpp> (tcv::Json; tcv links it PUBLIC and
#   tcvConfig.cmake finds it for an embedder). tcv links oneDNN, OpenBLAS, Gloo,
#   toml++, pugixml, libspng, CUDA and NCCL privately: a public header that
#   needs theirs would not compile for an embedder;
# - of kernels/, only the vocabulary the public API names is installed.
# Prints the installed headers' count; fails naming the file and the include.
cmake_minimum_required(VERSION 3.25)
if(NOT PREFIX)
  message(FATAL_ERROR "usage: cmake -DPREFIX=DIR -P check_installed_headers.cmake")
endif()
set(_root "${PREFIX}/include/tcv")
if(NOT IS_DIRECTORY "${_root}/engine" OR NOT EXISTS "${_root}/tcv.h")
  message(FATAL_ERROR "${_root}: no installed tcv headers (tcv.h, engine/)")
endif()

# kernels/ headers the public API names: DType, Error and the kernel tensor
# descriptor (base.h), the elementwise op codes of ops::unary_grad
# (cpu/elementwise.h) and the formulas they name (pointwise.h), ops::ConvAlgo of
# ops::set_conv_algo (cpu/conv.h), the SGD/Adam hyper-parameters of the fused
# optimizer steps (optim.h).
set(_kernels_allowed kernels/base.h kernels/cpu/elementwise.h kernels/pointwise.h
                     kernels/cpu/conv.h kernels/optim.h)

file(GLOB_RECURSE _headers RELATIVE "${_root}" "${_root}/*")
set(_errors "")
foreach(_rel IN LISTS _headers)
  if(NOT _rel MATCHES "\\.h$")
    string(APPEND _errors "\n  ${_rel}: not a header")
    continue()
  endif()
  if(_rel MATCHES "^kernels/" AND NOT _rel IN_LIST _kernels_allowed)
    string(APPEND _errors "\n  ${_rel}: a kernels/ header outside the public vocabulary")
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
      if(NOT _name MATCHES "^[a-z_]+$" AND NOT _name STREQUAL "omp.h"
         AND NOT (_name STREQUAL "nlohmann/json.hpp" AND _rel STREQUAL "engine/json.h"))
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
list(LENGTH _headers _count)
message("installed headers: ${_count}, each including only installed or standard headers")
