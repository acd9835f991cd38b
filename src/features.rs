//! (stage module: features — being written)
