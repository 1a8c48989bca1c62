//! Shared support for the end-to-end tests: find the workspace's built
//! binaries, start them as real processes on free loopback ports, wait until
//! they listen, and kill them when the test ends.
