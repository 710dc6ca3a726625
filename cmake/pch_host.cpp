// The unit that compiles the precompiled headers of a DOOLY_PCH=ON build (cmake/DoolyHelpers.cmake) for the
// libraries: nothing of its own.
