# Script mode (cmake -DFILES=a|b|c -P banned.cmake): fails when a C file calls a banned function
# (STYLE.md, after curl's checksrc): atoi and friends, sprintf, strcpy, strcat, gets.
string(REPLACE "|" ";" FILES "${FILES}")
set(bad "")
foreach(f ${FILES})
  file(STRINGS ${f} lines REGEX "(^|[^a-z_])(atoi|atol|atoll|sprintf|vsprintf|strcpy|strcat|strncpy|gets)[ ]*\\(")
  foreach(l ${lines})
    string(APPEND bad "${f}: ${l}\n")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "banned functions (use strtol/strtoll with range checks, snprintf):\n${bad}")
endif()
