//! readygap library.
