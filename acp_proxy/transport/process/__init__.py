"""Agent processes: spawning and ending a whole process tree, its watchdog, its async pipes."""
