//! Gather/scatter/index kernels.
