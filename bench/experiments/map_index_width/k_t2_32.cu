#define RS_TILE 2
#define RS_INDEX unsigned
#define RS_ENTRY k_t2_32
#include "kernel.cuh"
