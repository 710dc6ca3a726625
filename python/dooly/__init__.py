"""dooly: what each piece of GPU work costs, in seconds and joules.

Python side: engine adapters (dooly.engines), model configs (dooly.models), the torch tracer and the binding to the
C++ core. Importing this package imports nothing heavy; torch and transformers load when an adapter is used."""
