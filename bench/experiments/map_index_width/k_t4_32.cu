#define RS_TILE 4
#define RS_INDEX unsigned
#define RS_ENTRY k_t4_32
#include "kernel.cuh"
