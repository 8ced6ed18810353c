/* placeholder */
#include "emq.h"
int main(void)
{
    return 2;
}
