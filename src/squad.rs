//! (stage module: squad — being written)
