/*
 * rshared - the rshare hub of one node (network namespace).  See rshared(8).
 */
#include "hub.h"

int main(int argc, char **argv)
{
	return hub_main(argc, argv);
}
