#include "cli/cli.h"

int main(int argc, char** argv) { return volstack::cli::Main(argc, argv); }
