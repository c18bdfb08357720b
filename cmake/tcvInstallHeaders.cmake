# Installs tcv's public headers: the front-door headers (include/tcv/*.h) and
# every tcv header they reach through #include "...", nothing else. Kernels'
# internals, the oneDNN/CUDA/NCCL plumbing and tcv-train's own helpers stay
# out of the package, and the set follows the include graph as it is when
# installed, so moving an include never leaves a header missing or a stale
# one behind.
#
# Run by install(SCRIPT) with TCV_SOURCE_DIR (the checkout) and
# TCV_INCLUDE_DIR (where <tcv/...> goes, relative to the prefix) set.
#
# An installed header keeps its path under the prefix's include/tcv/: the front
# door at include/tcv/tcv.h, engine/tensor.h at include/tcv/engine/tensor.h.

# The source file a quoted include names, resolved as the compiler does:
# beside the including file, then from the checkout's root, then from include/.
function(tcv_resolve_include from name out)
  get_filename_component(_dir "${from}" DIRECTORY)
  foreach(_base "${_dir}" "${TCV_SOURCE_DIR}" "${TCV_SOURCE_DIR}/include")
    if(EXISTS "${_base}/${name}" AND NOT IS_DIRECTORY "${_base}/${name}")
      get_filename_component(_path "${_base}/${name}" ABSOLUTE)
      set(${out} "${_path}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  file(RELATIVE_PATH _rel "${TCV_SOURCE_DIR}" "${from}")
  message(FATAL_ERROR "[tcv install] ${_rel} includes \"${name}\", which is no header of the "
                      "checkout (public headers include only tcv headers with quotes)")
endfunction()

file(GLOB _queue "${TCV_SOURCE_DIR}/include/tcv/*.h")
set(_seen "")
while(_queue)
  list(POP_FRONT _queue _header)
  list(FIND _seen "${_header}" _found)  # (install scripts run without policies: no IN_LIST)
  if(NOT _found EQUAL -1)
    continue()
  endif()
  list(APPEND _seen "${_header}")
  file(STRINGS "${_header}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" _name "${_line}")
    tcv_resolve_include("${_header}" "${_name}" _path)
    list(APPEND _queue "${_path}")
  endforeach()
endwhile()

if(IS_ABSOLUTE "${TCV_INCLUDE_DIR}")
  set(_dest_root "${TCV_INCLUDE_DIR}/tcv")
else()
  set(_dest_root "${CMAKE_INSTALL_PREFIX}/${TCV_INCLUDE_DIR}/tcv")
endif()
list(SORT _seen)
foreach(_header IN LISTS _seen)
  file(RELATIVE_PATH _rel "${TCV_SOURCE_DIR}" "${_header}")
  string(REGEX REPLACE "^include/tcv/" "" _rel "${_rel}")
  get_filename_component(_sub "${_rel}" DIRECTORY)
  file(INSTALL DESTINATION "${_dest_root}/${_sub}" TYPE FILE FILES "${_header}")
endforeach()
list(LENGTH _seen _count)
message(STATUS "[tcv install] ${_count} public headers")
