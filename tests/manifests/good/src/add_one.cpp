// Parse-only fixture: the manifest corpus checks what the parser and the
// schema accept, nothing here is compiled.
#include "add_one.h"
