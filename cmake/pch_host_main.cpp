// The unit that compiles the precompiled headers of a DOOLY_PCH=ON build (cmake/DoolyHelpers.cmake) for the unit
// tests: an executable (its units are -fPIE, as the tests' are), so it has a main.
int main() { return 0; }
