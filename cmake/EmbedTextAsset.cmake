# Compiles a text file (CSS, JS) into the program as a C++ raw string, so
# the file can be edited as what it is while the binary stays one file.
#
#   gpuos_embed_text_asset(TARGET NAME IN OUT)
# adds to TARGET a header OUT (under the build tree) declaring
#   inline constexpr char NAME[] = R"ASSET(<the bytes of IN>)ASSET";
# and regenerates it whenever IN changes.  Run as a script (cmake -P) it
# writes the header; the function below arranges that at build time.
if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${IN}" _content)
  string(FIND "${_content}" ")ASSET\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${IN} contains )ASSET\", which would end the raw string early")
  endif()
  get_filename_component(_name "${IN}" NAME)
  file(WRITE "${OUT}.tmp"
       "// Generated from ${_name} by cmake/EmbedTextAsset.cmake; edit ${_name}, not this.\n"
       "#pragma once\n\nnamespace gpuos {\n\ninline constexpr char ${NAME}[] = R\"ASSET(${_content})ASSET\";\n\n"
       "}  // namespace gpuos\n")
  configure_file("${OUT}.tmp" "${OUT}" COPYONLY)
  file(REMOVE "${OUT}.tmp")
  return()
endif()

set(GPUOS_EMBED_TEXT_ASSET_SCRIPT ${CMAKE_CURRENT_LIST_FILE})

function(gpuos_embed_text_asset target name in out)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DIN=${in} -DOUT=${out} -P ${GPUOS_EMBED_TEXT_ASSET_SCRIPT}
    DEPENDS ${in} ${GPUOS_EMBED_TEXT_ASSET_SCRIPT}
    COMMENT "Embedding ${in}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
