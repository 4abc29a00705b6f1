// gpuos-trace: entry point.  Placeholder until the CLI lands.
int main() { return 1; }
