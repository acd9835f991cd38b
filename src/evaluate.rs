//! (stage module: evaluate — being written)
