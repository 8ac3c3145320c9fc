//! Convolution and pooling kernels.
