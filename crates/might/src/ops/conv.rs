//! Convolution and pooling (filled in by the conv work).
