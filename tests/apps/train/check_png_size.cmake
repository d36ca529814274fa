# cmake -DPNG=file.png -DWIDTH=w -DHEIGHT=h -P check_png_size.cmake
# Passes when PNG is a PNG file whose header (IHDR) says WIDTH x HEIGHT pixels.
if(NOT EXISTS "${PNG}")
  message(FATAL_ERROR "${PNG} was not written")
endif()
file(READ "${PNG}" signature LIMIT 8 HEX)
if(NOT signature STREQUAL "89504e470d0a1a0a")
  message(FATAL_ERROR "${PNG} is not a PNG (starts with ${signature})")
endif()
# The IHDR chunk follows the signature: length (4), "IHDR" (4), width (4), height (4), big-endian.
file(READ "${PNG}" size OFFSET 16 LIMIT 8 HEX)
string(SUBSTRING "${size}" 0 8 width_hex)
string(SUBSTRING "${size}" 8 8 height_hex)
math(EXPR width "0x${width_hex}")
math(EXPR height "0x${height_hex}")
if(NOT width EQUAL WIDTH OR NOT height EQUAL HEIGHT)
  message(FATAL_ERROR "${PNG} is ${width}x${height} pixels, expected ${WIDTH}x${HEIGHT}")
endif()
message("ok: ${PNG} is ${width}x${height}")
