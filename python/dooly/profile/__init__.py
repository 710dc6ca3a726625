"""`dooly profile`'s worker: runs every unit of the C++ plan alone on the device, over its sweep points, and commits
each point (time and energy) to the store through the binding (docs/profile.md). The plan, the store and the energy
engine are the core's; this package builds the units' inputs with torch and times them."""
