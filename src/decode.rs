//! (stage module: decode — being written)
