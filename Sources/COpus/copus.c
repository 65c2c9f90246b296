#include "copus.h"
