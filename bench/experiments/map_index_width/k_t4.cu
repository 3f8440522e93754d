#define RS_TILE 4
#define RS_INDEX unsigned long long
#define RS_ENTRY k_t4
#include "kernel.cuh"
