# Helpers of the build-time embedding scripts (embed_spirv.cmake, embed_web.cmake).

# embedded_entry(ENTRY KEY PATH): "key=path" split into its two parts.
function(embedded_entry entry key_var path_var)
  string(REPLACE "=" ";" parts "${entry}")
  list(GET parts 0 key)
  list(GET parts 1 path)
  set(${key_var} "${key}" PARENT_SCOPE)
  set(${path_var} "${path}" PARENT_SCOPE)
endfunction()

# embedded_bytes(PATH BYTES COUNT): the file's bytes as a C initializer list ("0x1f,0x8b,...")
# and how many there are.
function(embedded_bytes path bytes_var count_var)
  file(READ "${path}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(LENGTH "${hex}" hex_len)
  math(EXPR count "${hex_len} / 2")
  set(${bytes_var} "${bytes}" PARENT_SCOPE)
  set(${count_var} "${count}" PARENT_SCOPE)
endfunction()
