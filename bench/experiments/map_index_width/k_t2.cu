#define RS_TILE 2
#define RS_INDEX unsigned long long
#define RS_ENTRY k_t2
#include "kernel.cuh"
