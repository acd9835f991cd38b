//! (stage module: tokenize — being written)
