//! Unit tests of the task layer that drive it whole, through
//! [`Traced`](crate::task::traced::Traced). They sit above every file of
//! the layer, so that no file imports its own tests' helpers.

mod threads;
mod waker;
