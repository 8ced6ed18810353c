/* placeholder: libemq arrives with issue 4 */
#include "emq.h"
