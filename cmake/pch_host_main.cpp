// The unit that compiles the precompiled headers of a DOOLY_PCH=ON build (cmake/DoolyHelpers.cmake) for the unit
// tests and for the CLI: an executable (its units are -fPIE, as theirs are), so it has a main.
int main() { return 0; }
