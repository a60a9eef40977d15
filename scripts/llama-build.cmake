# Included into llama.cpp's CMake project by scripts/build_llama_server.sh (CMAKE_PROJECT_INCLUDE): what the
# build sets per file and per target, once every target exists.
# - The build is a unity build: each target's sources are compiled in batches, so the headers they share
#   (nlohmann's json, the C++ standard library) are parsed once per batch instead of once per file. The files
#   that do not compile batched with the others of their target are compiled on their own: common/json.cpp
#   specialises a template another file of its batch instantiates; mtmd's helpers refuse the internal
#   headers their batch includes.
# - mtmd (images and audio) is linked by the server but never runs for the embedded text models: it is
#   optimised less (-O1), which halves its compile time.
if(CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)  # the top project, once (ggml declares its own)
  function(_personagraph_build_settings)
    set_source_files_properties("${CMAKE_SOURCE_DIR}/common/json.cpp"
      DIRECTORY "${CMAKE_SOURCE_DIR}/common" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    set_source_files_properties("${CMAKE_SOURCE_DIR}/tools/mtmd/mtmd-helper.cpp"
      "${CMAKE_SOURCE_DIR}/tools/mtmd/mtmd-helper-gen.cpp"
      DIRECTORY "${CMAKE_SOURCE_DIR}/tools/mtmd" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    target_compile_options(mtmd PRIVATE -O1)
  endfunction()
  # At the end of the top directory's CMakeLists, when the targets exist.
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _personagraph_build_settings)
endif()
