/* numalab shim: see ../kshim.h */
#include "../kshim.h"
