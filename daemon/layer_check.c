/* layer_check: an empty program. daemon/meson.build links each layer's
 * library whole (every object, used or not) into one of these together
 * with the layers below it and nothing else: an object that calls a
 * function of a higher layer leaves an undefined symbol, and the build
 * fails. */
int main(void)
{
    return 0;
}
